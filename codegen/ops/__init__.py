"""Op emitters, one module per op family; each registers itself (see codegen/registry.py)."""
