"""Calibration to an operator's own cluster (`gclc calibrate`): the measurements of
compiler/measure/ turned into observations the model predicts (kernels, collectives,
training steps), the physics the model already has refitted to them with the design's
parts as the prior, outliers flagged, and the error band recomputed from the held-out
residuals of the user's own runs."""
