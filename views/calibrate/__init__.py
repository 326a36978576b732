"""What `gclc calibrate` writes: the calibrated design as GCL (`overrides.py`: derived parts,
cluster and jobs, each value naming its measurements) and the report of a calibration
(`report.py`: predictions before and after, constants moved, outliers, what to measure next)."""
