"""The bridge: the engine behind ``rewind serve --stdio`` for agents in other processes (Pi).

- :mod:`ledger.bridge.protocol`: the line protocol's messages and its JSON Schema.
- :mod:`ledger.bridge.host`: the session host that reaches the agent's session through calls.
- :mod:`ledger.bridge.server`: the read–handle–answer loop; never dies on bad input.
- :mod:`ledger.bridge.dispatch`: protocol events → engine events (a table of handlers), and the
  state the bridge keeps between events.
"""
