"use strict";
// The sink's ports: tests/chromium/exhaust.rs replaces the next line.
const SINK = { tcp: 0, udp: 0 };

const say = (id, text) => {
  document.getElementById(id).textContent = text;
};

function tryLinks() {
  const target = `http://127.0.0.1:${SINK.tcp}`;
  const links = [
    { rel: "dns-prefetch", href: target },
    { rel: "preconnect", href: target },
    { rel: "preconnect", href: target, crossOrigin: "anonymous" },
  ];
  for (const spec of links) {
    const link = document.createElement("link");
    link.rel = spec.rel;
    link.href = spec.href;
    if (spec.crossOrigin) {
      link.crossOrigin = spec.crossOrigin;
    }
    document.head.appendChild(link);
  }
  say("links", `Links: added ${links.length}.`);
}

async function tryRtc() {
  if (typeof RTCPeerConnection !== "function") {
    say("rtc", "WebRTC: RTCPeerConnection is not available.");
    return;
  }
  const pc = new RTCPeerConnection({ iceServers: [{ urls: `stun:127.0.0.1:${SINK.udp}` }] });
  const candidates = [];
  pc.addEventListener("icecandidate", (event) => {
    if (event.candidate) {
      candidates.push(event.candidate.type || "unknown");
    }
  });
  pc.createDataChannel("probe");
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const deadline = Date.now() + 3000;
  while (pc.iceGatheringState !== "complete" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  say("rtc", `WebRTC: gathering ${pc.iceGatheringState}; candidates [${candidates.join(", ")}].`);
}

Sasha.ready().then(async () => {
  if (!SINK.tcp || !SINK.udp) {
    say("state", "No sink configured.");
    return;
  }
  try {
    tryLinks();
  } catch (error) {
    say("links", `Links: ${error.name}: ${error.message}`);
  }
  try {
    await tryRtc();
  } catch (error) {
    say("rtc", `WebRTC: ${error.name}: ${error.message}`);
  }
  say("state", "Probed.");
});
