// protocol.js — physd.v1 over a WebSocket: the schema (proto/physd.proto,
// parsed at start by protobufjs), one ClientMessage per binary message
// out, one ServerMessage per binary message in (docs/http.md, "/ws").
//
// Normal path: open() connects, sends Hello (with the access tokens, if
// any) and resolves with the HelloReply; request(kind, body) sends a
// ClientMessage with a fresh request id and resolves with the Reply of the
// same id when its status is OK; every other ServerMessage (frames, stats,
// contact events, notices) goes to onPush.
//
// Failure modes: a Reply with another status rejects the request with a
// ProtocolError carrying the status name and the server's message; a
// closed socket rejects every request in flight and calls onClose with the
// reason; a message that does not parse closes the connection (the server
// never sends one).
//
// Invariants: request ids are unique per connection; 64-bit integers
// arrive as Long (protobufjs with long.js) and are turned into BigInt (ids)
// or Number (ticks, counts) by u64() and num().

import protobuf from 'protobufjs';

export function loadSchema(protoText) {
  const root = protobuf.parse(protoText, { keepCase: true }).root;
  const type = (n) => root.lookupType('physd.v1.' + n);
  const enumOf = (n) => root.lookupEnum('physd.v1.' + n).values;
  const statusNames = {};
  for (const [name, v] of Object.entries(enumOf('Status'))) statusNames[v] = name.replace(/^STATUS_/, '');
  return {
    root,
    ClientMessage: type('ClientMessage'),
    ServerMessage: type('ServerMessage'),
    enums: {
      Method: enumOf('Method'),
      Ordering: enumOf('Ordering'),
      ShapeType: enumOf('ShapeType'),
      BodyType: enumOf('BodyType'),
      Role: enumOf('Role'),
      NoticeKind: enumOf('NoticeKind'),
    },
    statusNames,
  };
}

// A 64-bit unsigned field (Long or Number) as a BigInt.
export function u64(x) {
  if (x === null || x === undefined) return 0n;
  if (typeof x === 'bigint') return x;
  if (typeof x === 'number') return BigInt(x);
  return (BigInt(x.high >>> 0) << 32n) | BigInt(x.low >>> 0);
}

// A 64-bit field that fits a Number (ticks, counts, sizes).
export function num(x) {
  if (x === null || x === undefined) return 0;
  if (typeof x === 'number') return x;
  if (typeof x === 'bigint') return Number(x);
  return x.toNumber();
}

// An id for a request field (protobufjs takes decimal strings for uint64).
export function idField(x) {
  return u64(x).toString();
}

export class ProtocolError extends Error {
  constructor(status, statusName, message, index) {
    super(`${statusName}: ${message}`);
    this.status = status;
    this.statusName = statusName;
    this.serverMessage = message;
    this.index = index; // ErrorDetail.index: the element of a list the error is about, or null
  }
}

export class Connection {
  constructor(schema, url) {
    this.schema = schema;
    this.url = url;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map(); // request id -> {resolve, reject}
    this.onPush = () => {};
    this.onClose = () => {};
    this.closed = false;
    this.bytesIn = 0;
    this.messagesIn = 0;
  }

  open(token, clientName = 'physd viewer') {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(this.url, 'physd.v1');
      } catch (e) {
        reject(e);
        return;
      }
      ws.binaryType = 'arraybuffer';
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        opened = true;
        const hello = { protocol_version: 1, client_name: clientName };
        if (token) hello.credentials = new TextEncoder().encode(token);
        this.request('hello', hello).then((r) => resolve(r.hello), reject);
      };
      ws.onmessage = (ev) => this.receive(ev.data);
      ws.onerror = () => {
        if (!opened) reject(new Error(`cannot connect to ${this.url}`));
      };
      ws.onclose = (ev) => this.finish(ev.reason || `the connection closed (code ${ev.code})`);
    });
  }

  finish(reason) {
    if (this.closed) return;
    this.closed = true;
    const err = new Error(reason);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.onClose(reason);
  }

  close() {
    if (this.ws) this.ws.close(1000, 'bye');
    this.finish('closed by the viewer');
  }

  receive(data) {
    let m;
    try {
      m = this.schema.ServerMessage.decode(new Uint8Array(data));
    } catch (e) {
      this.ws.close(1002, 'unparseable message');
      this.finish('a message from the server did not parse: ' + e.message);
      return;
    }
    this.bytesIn += data.byteLength;
    this.messagesIn++;
    if (m.msg === 'reply') {
      const r = m.reply;
      const id = num(r.request_id);
      const p = this.pending.get(id);
      if (p) {
        this.pending.delete(id);
        if (r.status === 0) p.resolve(r);
        else {
          const name = this.schema.statusNames[r.status] || String(r.status);
          p.reject(new ProtocolError(r.status, name, r.message, r.error ? r.error.index : null));
        }
        return;
      }
    }
    this.onPush(m);
  }

  // Sends one request (kind: the ClientMessage oneof field, e.g. 'pause').
  request(kind, body) {
    if (this.closed || !this.ws || this.ws.readyState !== WebSocket.OPEN)
      return Promise.reject(new Error('not connected'));
    const id = this.nextId++;
    const CM = this.schema.ClientMessage;
    const msg = CM.fromObject({ request_id: id, [kind]: body });
    const bytes = CM.encode(msg).finish();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(bytes);
    });
  }
}
