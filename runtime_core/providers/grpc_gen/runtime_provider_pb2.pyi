from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CommandRequest(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class RuntimeError(_message.Message):
    __slots__ = ("code", "message", "hint", "rule")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    hint: str
    rule: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., hint: _Optional[str] = ..., rule: _Optional[str] = ...) -> None: ...

class CommandReply(_message.Message):
    __slots__ = ("json", "error")
    JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    json: str
    error: RuntimeError
    def __init__(self, json: _Optional[str] = ..., error: _Optional[_Union[RuntimeError, _Mapping]] = ...) -> None: ...
