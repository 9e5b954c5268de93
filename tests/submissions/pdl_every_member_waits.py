# Every member waits at its start: right, but each member starts only when the one before has
# finished (no overlap at any boundary).
def group_switches(g):
    return [(True, k < g - 1, False) for k in range(g)]
