// SHA-256 (FIPS 180-4) fed piece by piece: the browser's crypto.subtle.digest takes a whole buffer
// only, and a checkpoint's weights are gigabytes. submit.js hashes the weights as the server does
// (leaderboard/submissions/checkpoint_io.hash_weights) before it uploads them, so weights the owner
// submitted before are refused before a byte is sent. window.PodiumSha256.create() -> {update, hex}.
(function () {
  "use strict";
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);

  function create() {
    const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    const w = new Uint32Array(64);
    const block = new Uint8Array(64);
    let filled = 0;       // bytes waiting in block
    let length = 0;       // bytes hashed in all (below 2**53: a checkpoint is far smaller)

    function compress(bytes, at) {
      for (let i = 0; i < 16; i++) {
        const j = at + 4 * i;
        w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
      }
      for (let i = 16; i < 64; i++) {
        const a = w[i - 15], b = w[i - 2];
        const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
        const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
      for (let i = 0; i < 64; i++) {
        const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (k + s1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
        const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
    }

    function update(bytes) {
      let at = 0;
      length += bytes.length;
      if (filled) {
        const take = Math.min(64 - filled, bytes.length);
        block.set(bytes.subarray(0, take), filled);
        filled += take; at = take;
        if (filled < 64) return;
        compress(block, 0); filled = 0;
      }
      for (; at + 64 <= bytes.length; at += 64) compress(bytes, at);
      if (at < bytes.length) { block.set(bytes.subarray(at), 0); filled = bytes.length - at; }
    }

    function hex() {
      const bits = length * 8;
      const tail = new Uint8Array(((filled + 9 + 63) >> 6) << 6);
      tail.set(block.subarray(0, filled));
      tail[filled] = 0x80;
      const view = new DataView(tail.buffer);
      view.setUint32(tail.length - 8, Math.floor(bits / 0x100000000));
      view.setUint32(tail.length - 4, bits >>> 0);
      for (let at = 0; at < tail.length; at += 64) compress(tail, at);
      return Array.from(h, (x) => (x >>> 0).toString(16).padStart(8, "0")).join("");
    }

    return {update, hex};
  }

  // The digest hash_weights makes of these files: each weights file (name order) as its UTF-8 name,
  // a NUL byte, then its bytes. onProgress(bytes done, bytes in all).
  async function weightsDigest(files, onProgress) {
    const digest = create();
    const ordered = files.slice().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const size = ordered.reduce((sum, f) => sum + f.size, 0);
    const encoder = new TextEncoder();
    const piece = 8 << 20;
    let done = 0;
    for (const file of ordered) {
      digest.update(encoder.encode(file.name));
      digest.update(new Uint8Array([0]));
      for (let start = 0; start < file.size; start += piece) {
        const bytes = new Uint8Array(await file.slice(start, Math.min(file.size, start + piece)).arrayBuffer());
        digest.update(bytes);
        done += bytes.length;
        if (onProgress) onProgress(done, size);
      }
    }
    return digest.hex();
  }

  window.PodiumSha256 = {create, weightsDigest};
})();
