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
# MCP tools (docs/TOOLS.md). A server has this long to start and list its tools, a call this
# long to answer: npx fetching nothing still takes seconds on two cores, and a slow tool is
# the user's to wait for, a hung one is not.
DEFAULT_TOOL_START_TIMEOUT_S = 30.0
DEFAULT_TOOL_CALL_TIMEOUT_S = 60.0
# A tool's result is cut to this many characters before the model sees it: a directory
# listing fits, a 10 MB file would fill any context the window gives a conversation.
DEFAULT_TOOL_RESULT_MAX_CHARS = 8000
# One reply may go this many rounds of calls, this many calls each, before it must answer.
DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_MAX_TOOL_CALLS_PER_ROUND = 8
