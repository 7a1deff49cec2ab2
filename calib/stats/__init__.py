"""Pure statistics for calibrated memorization claims (DESIGN.md, "Statistics").

Every function is pure, typed, validates its arguments (``ValueError`` naming the parameter) and
returns a frozen result object that cites its source. This package imports nothing else of calib.
"""
