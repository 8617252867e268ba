"""The ROLL adapter, tested against doubles of ROLL (``roll_types``)."""
