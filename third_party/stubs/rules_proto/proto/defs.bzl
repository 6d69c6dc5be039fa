"""Offline stand-in for rules_proto: forwards to the native proto rules."""

def proto_library(**kwargs):
    native.proto_library(**kwargs)
