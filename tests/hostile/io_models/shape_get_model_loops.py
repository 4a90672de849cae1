"""A get_model() that never returns: `buckets --decode --model` must stop its worker at --timeout."""


def get_model():
    while True:  # RAISES
        pass


def get_example_inputs():
    return ()
