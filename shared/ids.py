"""Identifier and relative-path rules shared by the wire models and the payload store."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
# A payload path is relative, uses '/' separators and each segment is an ID: no '..', no absolute paths.
PAYLOAD_PATH_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}){0,7}$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
