"""The HTTP shell around the policy: Metacontroller hook routes, parsing, errors, the clock."""
