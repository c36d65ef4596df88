"""physd_client.errors — what a call can raise.

Two families, as in the C library (pc_client.h): the server answered with a
status other than OK (PhysdError and one subclass per status, carrying the
numeric status, its name, the message, the request id and the reply's
ErrorDetail), or there is no answer (TransportError: the connection could not
be made, was closed, broke, or a reply did not come in time). TransportError
is a ConnectionError, so code that catches OSError for network failures keeps
working.
"""


class PhysdError(Exception):
    """The server's Reply had a status other than STATUS_OK.

    status: the protocol's Status number (5 for NOT_FOUND); code: its name
    without the STATUS_ prefix; message: the server's text; request_id;
    tick: the world's tick when the request ran (world requests); detail:
    the Reply's ErrorDetail (index, field) or None; reply: the whole Reply.
    """

    status = None

    def __init__(self, status, code, message, request_id=0, tick=0, detail=None, reply=None):
        super().__init__("%s: %s" % (code, message))
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.tick = tick
        self.detail = detail
        self.reply = reply


class Cancelled(PhysdError):
    status = 1


class InvalidArgument(PhysdError):
    status = 3


class DeadlineExceeded(PhysdError):
    status = 4


class NotFound(PhysdError):
    status = 5


class AlreadyExists(PhysdError):
    status = 6


class PermissionDenied(PhysdError):
    status = 7


class ResourceExhausted(PhysdError):
    status = 8


class FailedPrecondition(PhysdError):
    status = 9


class Aborted(PhysdError):
    status = 10


class Unimplemented(PhysdError):
    status = 12


class Internal(PhysdError):
    status = 13


class Unavailable(PhysdError):
    status = 14


class Unauthenticated(PhysdError):
    status = 16


_BY_STATUS = {cls.status: cls for cls in PhysdError.__subclasses__()}


def error_from_reply(reply, status_name):
    """The PhysdError for a Reply (status_name: number -> name)."""
    cls = _BY_STATUS.get(reply.status, PhysdError)
    detail = reply.error if reply.HasField("error") else None
    return cls(reply.status, status_name(reply.status), reply.message, reply.request_id, reply.tick, detail, reply)


class TransportError(ConnectionError):
    """No reply will come: connecting failed, or the connection is gone."""


class ConnectionClosed(TransportError):
    """The connection ended. reply: the server's Reply with request id 0 that
    said why (a framing or limit error, such as too many connections), or
    None; status: its status number (None without one)."""

    def __init__(self, message, reply=None):
        super().__init__(message)
        self.reply = reply

    @property
    def status(self):
        return self.reply.status if self.reply is not None else None


class ProtocolError(TransportError):
    """The server sent something that is not a physd.v1 ServerMessage, or a
    frame over the max_frame it announced; the connection is closed."""


class Timeout(TransportError, TimeoutError):
    """No reply within the timeout (the request stays pending: a late reply
    is discarded)."""
