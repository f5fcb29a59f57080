"""Hearth's defaults, one source each: the engine, the window and the CLI all read them here.

Importing this costs nothing (no Qt, no llama.cpp, no numpy): the CLI builds its argument
parser from it before it knows what it will run.
"""

# How long a reply may get: long enough for a worked answer with code, short enough that
# a model stuck in a loop stops.
DEFAULT_MAX_TOKENS = 2048
# Tokens of context each conversation gets when a model is loaded.
DEFAULT_CONTEXT_PER_CONVERSATION = 4096
# Logical batch size (llama.cpp's n_batch): rows one llama_decode takes.
DEFAULT_N_BATCH = 512
# Physical batch size (llama.cpp's n_ubatch): rows computed at once; the planner reserves
# compute buffers for it and the scheduler's prefill chunks are sized by it.
DEFAULT_N_UBATCH = 512
# The KV cache's type unless a load asks for another (a ``KvCacheType`` value).
DEFAULT_KV_CACHE_TYPE = "f16"
# Where the OpenAI-compatible server listens: this machine only, llama-server's port.
DEFAULT_API_HOST = "127.0.0.1"
DEFAULT_API_PORT = 8080
# The port an RPC worker listens on: llama.cpp's rpc-server default.
DEFAULT_WORKER_PORT = 50052
# Requests that may wait for a free sequence before new ones are refused as overloaded.
DEFAULT_QUEUE_CAPACITY = 32
# Drafts per sequence per tick with speculation: an upper bound (the adaptive policy drafts
# what pays). Each draft is a logit row llama.cpp must reserve, so loads plan for it.
DEFAULT_MAX_DRAFT = 16
