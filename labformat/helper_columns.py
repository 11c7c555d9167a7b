"""The helper columns a write carries next to the data while it is planned and routed: `_lf_` names, never written to a file.

An input column may not start with PREFIX (`schema.py` refuses it), so none of these can meet a column of the data.
"""

PREFIX = "_lf_"

# Step 1 on: every record's key, partition path and how many input rows it stood for.
PART = "_lf_partition_path"
KEY = "_lf_key"
COUNT = "_lf_n"  # rows this deduplicated record stood for
NEWEST = "_lf_row"  # step 1: the winning row of a key, as one struct
NULL_ORDERING = "_lf_null_ordering"  # step 1: input rows of the record with a null precombine value
BAD_KEYS = "_lf_bad_keys"  # step 1: input rows whose record key is null or blank

# Step 3, the tag: where each record goes.
FILE_ID = "_lf_file_id"  # the file group an incoming record updates; null: an insert
BUCKET = "_lf_bucket"  # BUCKET index only
FROM_FILE = "_lf_file_name"  # SIMPLE: the base file a stored key was read from
OLD_PART = "_lf_old_partition_path"  # global indexes: the partition that holds the key
NEW_PART = "_lf_new_partition_path"  # global indexes: the partition path the incoming record names
DROP = "_lf_drop"  # global indexes: true on a row that only removes a moved record's old copy
DEAD = "_lf_dead"  # global indexes: a stored copy a log file of its slice deleted
ANY_LIVE = "_lf_any"  # global indexes: whether any stored copy of the key is live
COPY_RANK = "_lf_copy_rank"  # global indexes: a key's stored copies in file group order
AT_HOME = "_lf_at_home"  # global indexes: a copy already sits in the partition the record names
FIRST_COPY = "_lf_first"  # global indexes: the key's first stored copy
ROLE = "_lf_role"  # global indexes: 0 as tagged, 1 remove the old copy, 2 insert in the new partition

# Step 7, the write: which task and file group each record goes to.
TARGET = "_lf_target"  # which write target (file group) a row goes to
TASK_KEY = "_lf_task_key"  # the value Spark's hash partitioning sends to the target's task
