"""The systems the report compares: their names, display labels and column order, the default
set, and the tolerances of the output check (flashtune's contexts, PyTorch SDPA's backends,
FlashAttention-4 where it imports, FlexAttention; measure.py runs them)."""

# Display names and the order of the columns. forcedN are added at run time.
LABELS = {"flashtune": "flashtune", "fa2": "FA2", "cudnn": "cuDNN", "efficient": "mem-eff", "flex": "Flex",
          "fa4": "FA4"}
ORDER = ["flashtune", "forced1", "forced2", "forced3", "forced4", "fa2", "cudnn", "efficient", "fa4", "flex"]
DEFAULT_SYSTEMS = "flashtune,fa2,cudnn,efficient"
# Output check against the fp64 reference: relative L2 error and max abs error per dtype.
# (flashtune's own verification uses 2e-3 / 1.6e-2 relative L2; these leave room for the
# other systems' rounding while an O(1) error of a wrong kernel is far outside.)
TOLERANCE = {"f16": {"rel_l2": 5e-3, "max_abs": 2e-2, "lse": 1e-2},
             "bf16": {"rel_l2": 3e-2, "max_abs": 1e-1, "lse": 5e-2}}
