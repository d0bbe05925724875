"""What the passes need besides IR: diagnostics, parsing, verifying, remarks, the target, the session."""
