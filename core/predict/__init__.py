"""Predictions: an experiment's points on any hardware and the model's accuracy (`predictions`), your own model
(`ownmodel`) and the write-ups' figures on the hardware they name (`writeups`). May import: everything below it
(ground, store, measure, model, calibration, present), never the experiment registry: its callers pass the
experiments."""
