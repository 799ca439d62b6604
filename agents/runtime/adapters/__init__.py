"""Adapters of the scars gate to agent frameworks (issue 18). Each module imports its framework lazily or not at all:

- ``openai_tools``: ``OpenAIToolGate``, middleware for the ``openai`` client's tool calling;
- ``hf``:          ``logits_processor``, a ``transformers.LogitsProcessor`` that can only spell unmasked calls;
- ``vllm``:        ``VLLMLogitsProcessor``, the same mask behind vLLM's per-request logits-processor callable;
- ``mcp_gate``:    ``McpGate``, a proxy MCP server that forwards an upstream server's tools and refuses forbidden calls.
"""
