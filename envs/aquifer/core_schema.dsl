# Arena C's core schema H (paper §1, §3.1): human-written rules in the patch DSL, read-only.
# One rule per line; '#' starts a comment.

# No single draw above a fifth of the aquifer's capacity (the same kind of cap as arenas A and B, in C's units).
if tool_is("pump") and action.volume > 12 then forbid_tool_call("pump")
