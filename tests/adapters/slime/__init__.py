"""The slime adapter, tested against doubles of slime (``slime_types``) and, where present, slime itself."""
