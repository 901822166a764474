// The PM media frame format of socketify.realtime.pulse.media, big-endian:
// "PM" | kind u8 | stream u16 | seq u32 | timestamp_us u64 | flags u8
// | mime_len u16 + mime (image kinds 3 and 4 only) | payload
export const VOICE = 1, VIDEO = 2, IMAGE = 3, IMAGE_END = 4;
export const KEY_FRAME = 0x01, LAST = 0x02;

const isImage = (kind) => kind === IMAGE || kind === IMAGE_END;

export function pack(kind, stream, seq, flags, payload, mime = "") {
  const mimeBytes = isImage(kind) ? new TextEncoder().encode(mime) : new Uint8Array(0);
  const head = 18 + (isImage(kind) ? 2 + mimeBytes.length : 0);
  const frame = new Uint8Array(head + payload.byteLength);
  const view = new DataView(frame.buffer);
  frame.set([0x50, 0x4d, kind]);
  view.setUint16(3, stream);
  view.setUint32(5, seq >>> 0);
  // Microseconds on this page's monotonic clock: an order, not a wall time.
  view.setBigUint64(9, BigInt(Math.round(performance.now() * 1000)));
  frame[17] = flags;
  if (isImage(kind)) {
    view.setUint16(18, mimeBytes.length);
    frame.set(mimeBytes, 20);
  }
  frame.set(new Uint8Array(payload.buffer ?? payload, payload.byteOffset ?? 0, payload.byteLength), head);
  return frame;
}

export function unpack(buffer) {
  const frame = new Uint8Array(buffer);
  if (frame.length < 18 || frame[0] !== 0x50 || frame[1] !== 0x4d) return null;
  const kind = frame[2];
  if (kind < VOICE || kind > IMAGE_END) return null;
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  let offset = 18;
  let mime = "";
  if (isImage(kind)) {
    if (frame.length < 20) return null;
    const size = view.getUint16(18);
    if (frame.length < 20 + size) return null;
    mime = new TextDecoder("ascii").decode(frame.subarray(20, 20 + size));
    offset = 20 + size;
  }
  return {
    kind, mime,
    stream: view.getUint16(3),
    seq: view.getUint32(5),
    timestampUs: view.getBigUint64(9),
    flags: frame[17],
    payload: frame.subarray(offset),
  };
}
