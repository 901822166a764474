// Voice as PM frames: the microphone goes out as 16-bit little-endian mono PCM at 16 kHz, one
// frame per 1024 samples (64 ms); what the others say is played back to back, in arrival
// order, a little behind real time so that small network jitter does not cut words.
"use strict";

const Voice = {
  RATE: 16000,
  SAMPLES: 1024,
  LEAD: 0.08,  // seconds of buffering before the first frame of a burst plays
  context: null,
  capture: null,
  seq: 0,
  playAt: 0,
  heard: 0,

  // Made on a click (Enter or Talk), so the browser lets it play sound.
  audio() {
    if (!this.context) this.context = new AudioContext({sampleRate: this.RATE});
    if (this.context.state === "suspended") this.context.resume();
    return this.context;
  },

  get talking() { return this.capture !== null; },

  async start(sendFrame) {
    const context = this.audio();
    const stream = await navigator.mediaDevices.getUserMedia(
      {audio: {channelCount: 1, echoCancellation: true, noiseSuppression: true}});
    const source = context.createMediaStreamSource(stream);
    // A ScriptProcessor hands us raw samples in every browser without a module file; it only
    // runs while connected to the output, so it goes there through a muted gain.
    const processor = context.createScriptProcessor(this.SAMPLES, 1, 1);
    const mute = context.createGain();
    mute.gain.value = 0;
    processor.onaudioprocess = (event) => {
      const samples = event.inputBuffer.getChannelData(0);
      const pcm = new Int16Array(samples.length);
      for (let i = 0; i < samples.length; i += 1) {
        pcm[i] = Math.max(-1, Math.min(1, samples[i])) * 0x7fff;
      }
      this.seq = (this.seq + 1) >>> 0;
      sendFrame(PM.pack(PM.VOICE, 0, this.seq, 0, new Uint8Array(pcm.buffer)));
    };
    source.connect(processor);
    processor.connect(mute);
    mute.connect(context.destination);
    this.capture = {stream, source, processor, mute};
  },

  stop() {
    if (!this.capture) return;
    const {stream, source, processor, mute} = this.capture;
    processor.onaudioprocess = null;
    source.disconnect();
    processor.disconnect();
    mute.disconnect();
    for (const track of stream.getTracks()) track.stop();
    this.capture = null;
  },

  play(payload) {
    this.heard += 1;
    const context = this.audio();
    const pcm = new Int16Array(payload.slice().buffer);  // a copy: aligned for Int16Array
    const buffer = context.createBuffer(1, pcm.length, this.RATE);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < pcm.length; i += 1) channel[i] = pcm[i] / 0x8000;
    const node = context.createBufferSource();
    node.buffer = buffer;
    node.connect(context.destination);
    this.playAt = Math.max(this.playAt, context.currentTime + this.LEAD);
    node.start(this.playAt);
    this.playAt += buffer.duration;
  },
};
