"""Tests of the RAGEN adapter, with doubles of RAGEN and verl at the supported versions."""
