/**
 * Finds the values a msgpack message encodes as floats, by path: a decoder hands back the same JS
 * number for 3 and 3.0, but a reader in a typed language refuses a float where the protocol says
 * integer (docs/protocol.md §1), so the kit reads the bytes themselves.
 */

/** Paths (`attempt`, `error.retryAfterMs`, `results.0`) of the float-encoded values; throws on bytes that are not msgpack. */
export function floatPaths(bytes: Uint8Array): string[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const found: string[] = [];
  let pos = 0;
  const need = (n: number): void => {
    if (pos + n > bytes.length) throw new Error('the message ends in the middle of a value');
  };
  const u = (size: 1 | 2 | 4): number => {
    need(size);
    const v = size === 1 ? view.getUint8(pos) : size === 2 ? view.getUint16(pos) : view.getUint32(pos);
    pos += size;
    return v;
  };
  const str = (n: number): string => {
    need(n);
    const s = Buffer.from(bytes.buffer, bytes.byteOffset + pos, n).toString('utf8');
    pos += n;
    return s;
  };
  const skip = (n: number): void => {
    need(n);
    pos += n;
  };
  const join = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);
  // Returns the value when it is a string (map keys), else undefined.
  const walk = (path: string, depth: number): string | undefined => {
    if (depth > 200) throw new Error('nested too deep');
    const c = u(1);
    if (c <= 0x7f || c >= 0xe0 || c === 0xc0 || c === 0xc2 || c === 0xc3) return undefined;
    if (c >= 0xa0 && c <= 0xbf) return str(c & 0x1f);
    if (c === 0xd9 || c === 0xda || c === 0xdb) return str(u(c === 0xd9 ? 1 : c === 0xda ? 2 : 4));
    if (c >= 0x80 && c <= 0x8f) return map(path, c & 0x0f, depth);
    if (c === 0xde || c === 0xdf) return map(path, u(c === 0xde ? 2 : 4), depth);
    if (c >= 0x90 && c <= 0x9f) return array(path, c & 0x0f, depth);
    if (c === 0xdc || c === 0xdd) return array(path, u(c === 0xdc ? 2 : 4), depth);
    if (c === 0xca || c === 0xcb) {
      found.push(path);
      skip(c === 0xca ? 4 : 8);
      return undefined;
    }
    if (c === 0xcc || c === 0xd0) return void skip(1);
    if (c === 0xcd || c === 0xd1) return void skip(2);
    if (c === 0xce || c === 0xd2) return void skip(4);
    if (c === 0xcf || c === 0xd3) return void skip(8);
    if (c === 0xc4 || c === 0xc5 || c === 0xc6) return void skip(u(c === 0xc4 ? 1 : c === 0xc5 ? 2 : 4));
    if (c >= 0xd4 && c <= 0xd8) return void skip(1 + (1 << (c - 0xd4)));
    if (c === 0xc7 || c === 0xc8 || c === 0xc9) return void skip(1 + u(c === 0xc7 ? 1 : c === 0xc8 ? 2 : 4));
    throw new Error(`byte 0x${c.toString(16)} at offset ${pos - 1} is not a msgpack type`);
  };
  const map = (path: string, n: number, depth: number): undefined => {
    for (let i = 0; i < n; i++) {
      const key = walk(join(path, '(key)'), depth + 1) ?? `(key ${i})`;
      walk(join(path, key), depth + 1);
    }
    return undefined;
  };
  const array = (path: string, n: number, depth: number): undefined => {
    for (let i = 0; i < n; i++) walk(join(path, String(i)), depth + 1);
    return undefined;
  };
  walk('', 0);
  return found;
}
