"""Items: push, pop, complete, fail, extend, and a look at one (the spec's tag `items`)."""
