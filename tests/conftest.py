from hypothesis import settings

# Timing belongs in benchmarks: a property test must not fail because CI is busy (e.g. with
# the test host's qemu, which stays up for the whole session).
settings.register_profile("numa-kubelets", deadline=None)
settings.load_profile("numa-kubelets")
