"""Two builds of libflashtune in one process (bench/bwd_compare.py --base-lib, bench/ab_libs.py
--interleave): the flashtune package imported as usual binds the library FLASHTUNE_LIB names, and
second_copy gives a second copy of the package bound to another build. Each copy calls its own
library through its own handle (ctypes loads them RTLD_LOCAL, so neither's symbols resolve the
other's calls). Their compile caches may be shared: a cache key is the hash of the generated
source and the target, so two builds whose templates differ never read each other's cubins."""
import importlib.util
import os
import sys


def second_copy(flashtune, lib, name="flashtune_base"):
    """A second copy of the package `flashtune` (already imported) bound to the library at lib.
    The first copy's library is loaded first, before FLASHTUNE_LIB changes for the second's."""
    flashtune.version()
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(flashtune.__file__),
                                                                     "__init__.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    saved = os.environ.get("FLASHTUNE_LIB")
    os.environ["FLASHTUNE_LIB"] = os.path.abspath(lib)
    try:
        print("%s: %s (%s)" % (name, mod.version(), lib), file=sys.stderr)
    finally:
        if saved is None:
            del os.environ["FLASHTUNE_LIB"]
        else:
            os.environ["FLASHTUNE_LIB"] = saved
    return mod
