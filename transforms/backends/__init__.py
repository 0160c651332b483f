"""Model backends behind one interface (base.py): vLLM (vllm.py), an
OpenAI-compatible server (openai.py over http_transport.py) and replay
(replay.py); factory.py picks one from the config.
"""
