# fuse_chain. The process exits while the submission loads (no exception to catch).
import os

os._exit(3)
