"""A plug-in that registers its memory when imported (``--import regmem``); workers import it too."""

from capacity import variants
from usermem import GainMemory

variants.register("registered-gain", GainMemory, "a gain memory registered on import (tests)")
