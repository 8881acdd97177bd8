"""The dispatcher's reconcile and what it reads and writes: the group read, the applier, the
writes, the record kept between reconciles, the placement and collection steps.
"""
