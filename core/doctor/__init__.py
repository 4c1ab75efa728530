"""The doctor (`python -m core doctor`): on any machine, a stated time budget spent where it is worth most: a plan of
steps (the calibration, each experiment's same-host points, the checks), each step's record and the bundle written
as it finishes, the checks, and this machine's verdicts and cost-model accuracy. Imports the store, measure, model,
calibration, present, predict, experiments and report packages; only core.commands imports it."""
