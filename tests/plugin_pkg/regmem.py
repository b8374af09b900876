"""A plug-in that registers its memory when imported (``--import regmem``); workers import it too."""

from usermem import GainMemory

from lacapacity import variants

variants.register("registered-gain", GainMemory, "a gain memory registered on import (tests)")
