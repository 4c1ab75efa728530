"""The cost model: `costmodel` (a unit's census priced on a host and an optional GPU), `hardware` (the catalogue,
core/model/hardware.json, and the Target a prediction runs on), `profiles` (a machine's calibrated figures and where
they live), `reference_figures` (catalogue figures derived from the reference machines) and `conv_probes` (the
convolution shapes calibration times and the model reads). May import: the ground modules, core.store and
core.measure."""
