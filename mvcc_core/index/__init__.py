"""Scalar indices (BTREE, BITMAP) and the planner that lets scans use them."""
