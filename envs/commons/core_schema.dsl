# The commons arena's core schema H (paper §1, §3.1): human-written rules in the patch DSL, read-only.
# One rule per line; '#' starts a comment.

# No single request above a fifth of the pool's capacity (twice the sustainable share at full stock).
if tool_is("harvest") and action.amount > 20 then forbid_tool_call("harvest")
