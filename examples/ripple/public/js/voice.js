// Voice for calls: the microphone as 20 ms PCM frames out, and frames in played back in order.
import * as PM from "./pm.js";

const RATE = 16000;               // narrow-band speech: 32 KB/s of PCM
const FRAME_SAMPLES = RATE / 50;  // 20 ms
const LEAD = 0.08;                // seconds of buffer ahead of playback, against jitter

// Start capturing; `send(frameBytes)` gets each packed PM voice frame. Returns stop().
export async function startCapture(send) {
  const context = new AudioContext({sampleRate: RATE});
  await context.audioWorklet.addModule("/js/capture-worklet.js");
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: {echoCancellation: true, noiseSuppression: true, channelCount: 1},
  });
  const source = context.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(context, "ripple-capture", {
    processorOptions: {frameSamples: FRAME_SAMPLES},
  });
  let seq = 0;
  node.port.onmessage = (message) => {
    seq += 1;
    send(PM.pack(PM.VOICE, 0, seq, 0, new Uint8Array(message.data)));
  };
  source.connect(node);
  // The worklet writes silence; connecting it keeps the graph pulling it.
  node.connect(context.destination);
  await context.resume();
  return () => {
    for (const track of stream.getTracks()) track.stop();
    node.port.onmessage = null;
    context.close();
  };
}

// Plays PCM voice frames back to back; `frames` counts what arrived, `peak` is the loudest
// sample heard (0 to 1), which tells a live microphone from a muted one.
export class Player {
  constructor() {
    this.context = new AudioContext({sampleRate: RATE});
    this.playhead = 0;
    this.frames = 0;
    this.peak = 0;
  }

  play(payload) {
    this.frames += 1;
    const samples = Math.floor(payload.byteLength / 2);
    if (samples === 0) return;
    const view = new DataView(payload.buffer, payload.byteOffset, samples * 2);
    const buffer = this.context.createBuffer(1, samples, RATE);
    const out = buffer.getChannelData(0);
    for (let i = 0; i < samples; i++) {
      out[i] = view.getInt16(i * 2, true) / 0x8000;
      this.peak = Math.max(this.peak, Math.abs(out[i]));
    }
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const now = this.context.currentTime;
    // Fell behind (a gap, or the first frame): start again a little ahead of now.
    if (this.playhead < now) this.playhead = now + LEAD;
    source.start(this.playhead);
    this.playhead += buffer.duration;
  }

  close() {
    this.context.close();
  }
}
