"""Calibration: the probes that measure a machine's figures for the cost model (`calibrate`, with `op_probes`
and `module_probes`) into its profile (core.model.profiles). May import: the ground modules, core.store,
core.measure and core.model."""
