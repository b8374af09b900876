"""The package's one exception type for user errors."""


class CapacityError(ValueError):
    """Bad input to a capacity function: the message says what was wrong and what is allowed.

    It subclasses ValueError, so ``except ValueError`` keeps working in user code.
    """
