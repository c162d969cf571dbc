/* Tessera's staff scanner (docs/redemption.md): reads a pass's barcode with the camera, asks
   POST /v1/scans on this origin whether to let the holder in, and shows the answer full-screen.
   Plain script, no build step; every URL it uses comes from the page's data attributes. */
(() => {
  "use strict";

  const page = document.body.dataset;
  const KEY_ITEM = "tessera.scanner.key";
  const LOCATION_ITEM = "tessera.scanner.location";
  const COUNT_ITEM = "tessera.scanner.accepted";
  const SCANNER_KEY = /^svc_scan_(test|live)_[A-Za-z0-9_-]+$/;
  const SECRET_KEY = /^svc_(test|live)_/;
  // The formats Wallet passes carry; the native names, then the vendored decoder's.
  const NATIVE_FORMATS = ["qr_code", "pdf417", "aztec", "code_128"];
  const ZXING_FORMATS = ["QRCode", "PDF417", "Aztec", "Code128"];
  const DECODE_EVERY_MS = 150;
  // A code that stays in view is one presentation: it is posted again only after it has been
  // out of view this long, so a phone held to the camera is not scanned several times.
  const GONE_AFTER_MS = 2000;
  const ACCEPTED_CLOSES_AFTER_MS = 3000;
  const ANSWER_TIMEOUT_MS = 10000;
  const REASONS = {
    unknown_code: ["Unknown code", "This code is not a pass of this account."],
    already_redeemed: ["Already redeemed", "This pass has no uses left."],
    voided: ["Voided", "The issuer has voided this pass."],
    not_yet_valid: ["Not valid yet", "This pass cannot be used before its start date."],
    expired: ["Expired", "This pass is past its end date."],
    wrong_mode: ["Test / live mismatch", "Test scanner keys check test passes only, live keys live passes."],
  };

  const $ = (id) => document.getElementById(id);
  const ui = {
    mode: $("mode"),
    count: $("accepted-count"),
    changeKey: $("change-key"),
    setup: $("setup"),
    keyForm: $("key-form"),
    key: $("key"),
    location: $("location"),
    keyError: $("key-error"),
    cancelSetup: $("cancel-setup"),
    forgetKey: $("forget-key"),
    scanner: $("scanner"),
    video: $("camera"),
    status: $("camera-status"),
    manualForm: $("manual-form"),
    manualCode: $("manual-code"),
    result: $("result"),
    resultTitle: $("result-title"),
    resultReason: $("result-reason"),
    resultHolder: $("result-holder"),
    resultDetail: $("result-detail"),
    retry: $("result-retry"),
    next: $("result-next"),
  };

  const state = {
    key: null,
    location: "",
    accepted: 0,
    stream: null,
    detector: null,
    decoding: false,
    attempt: null, // the code being checked and its Idempotency-Key, kept for "Try again"
    result: null, // the answer on screen
    held: new Map(), // posted code -> when it was last seen
    closeTimer: 0,
    audio: null,
  };

  // Storage can be unavailable (private modes, blocked cookies): the page then asks again.
  function read(storage, name) {
    try {
      return window[storage].getItem(name);
    } catch (_) {
      return null;
    }
  }

  function write(storage, name, value) {
    try {
      if (value === null) window[storage].removeItem(name);
      else window[storage].setItem(name, value);
    } catch (_) {
      /* kept for this page only */
    }
  }

  // --- The key -----------------------------------------------------------------------------

  function showSetup(message) {
    stopCamera();
    ui.scanner.hidden = true;
    ui.setup.hidden = false;
    ui.key.value = "";
    ui.key.required = state.key === null;
    ui.key.placeholder = state.key === null ? "svc_scan_…" : "Leave empty to keep the current key";
    ui.location.value = state.location;
    ui.cancelSetup.hidden = state.key === null;
    ui.forgetKey.hidden = state.key === null;
    ui.changeKey.hidden = true;
    setKeyError(message || "");
    ui.key.focus();
  }

  function setKeyError(message) {
    ui.keyError.textContent = message;
    ui.keyError.hidden = message === "";
  }

  function saveKey(event) {
    event.preventDefault();
    unlockAudio();
    const key = ui.key.value.trim() || state.key || "";
    if (SECRET_KEY.test(key)) {
      setKeyError(
        "That is a secret API key: it can issue and void passes, so it must not be kept on a " +
          "scanner. Create a scanner key (POST /v1/scanner_keys) and enter that.",
      );
      return;
    }
    if (!SCANNER_KEY.test(key)) {
      setKeyError("A scanner key starts with svc_scan_test_ or svc_scan_live_.");
      return;
    }
    state.location = ui.location.value.trim().slice(0, 200);
    write("localStorage", KEY_ITEM, key);
    write("localStorage", LOCATION_ITEM, state.location || null);
    useKey(key);
  }

  function forgetKey() {
    write("localStorage", KEY_ITEM, null);
    state.key = null;
    ui.mode.hidden = true;
    showSetup("");
  }

  function useKey(key) {
    state.key = key;
    ui.mode.hidden = !key.startsWith("svc_scan_test_");
    ui.setup.hidden = true;
    ui.scanner.hidden = false;
    ui.changeKey.hidden = false;
    startCamera();
  }

  // --- The camera and the decoder -----------------------------------------------------------

  function setStatus(text, problem) {
    ui.status.textContent = text;
    ui.status.classList.toggle("camera-status-problem", Boolean(problem));
  }

  function readyStatus() {
    const sound = state.audio && state.audio.state === "running";
    setStatus("Hold a pass's barcode inside the frame" + (sound ? "" : " · tap once for sound"));
  }

  async function startCamera() {
    if (state.stream || ui.scanner.hidden) return;
    const media = navigator.mediaDevices;
    if (!media || !media.getUserMedia) {
      setStatus(
        window.isSecureContext
          ? "This browser cannot open the camera. Type codes below."
          : "The camera needs an https:// address. Type codes below.",
        true,
      );
      return;
    }
    setStatus("Starting the camera…");
    let stream;
    try {
      stream = await media.getUserMedia({
        audio: false,
        video: { facingMode: { ideal: "environment" }, width: { ideal: 1280 }, height: { ideal: 720 } },
      });
    } catch (error) {
      const blocked = error && (error.name === "NotAllowedError" || error.name === "SecurityError");
      setStatus(
        blocked
          ? "Camera access is blocked. Allow it in the browser's settings, or type codes below."
          : "No camera could be opened. Type codes below.",
        true,
      );
      return;
    }
    if (ui.scanner.hidden || state.stream) {
      stream.getTracks().forEach((track) => track.stop());
      return;
    }
    state.stream = stream;
    ui.video.srcObject = stream;
    try {
      await ui.video.play();
      state.detector = state.detector || (await makeDetector());
    } catch (_) {
      setStatus("The barcode reader could not start. Type codes below.", true);
      return;
    }
    document.body.dataset.decoder = state.detector.name;
    readyStatus();
    if (!state.decoding) decodeLoop();
  }

  function stopCamera() {
    if (state.stream) state.stream.getTracks().forEach((track) => track.stop());
    state.stream = null;
    ui.video.srcObject = null;
  }

  // The browser's own BarcodeDetector where it reads all four formats (Android, macOS, ...),
  // else the vendored zxing-cpp WebAssembly build, served by Tessera like the rest.
  async function makeDetector() {
    if ("BarcodeDetector" in window) {
      try {
        const supported = await window.BarcodeDetector.getSupportedFormats();
        if (NATIVE_FORMATS.every((format) => supported.includes(format))) {
          const native = new window.BarcodeDetector({ formats: NATIVE_FORMATS });
          return {
            name: "native",
            detect: async (video) => (await native.detect(video)).map((code) => code.rawValue),
          };
        }
      } catch (_) {
        /* fall back to the vendored decoder */
      }
    }
    const zxing = window.ZXingWASM;
    await zxing.prepareZXingModule({
      overrides: {
        locateFile: (path, prefix) => (path.endsWith(".wasm") ? page.decoderWasm : prefix + path),
      },
      fireImmediately: true,
    });
    const canvas = document.createElement("canvas");
    const context = canvas.getContext("2d", { willReadFrequently: true });
    const options = { formats: ZXING_FORMATS, tryHarder: true, maxNumberOfSymbols: 1 };
    return {
      name: "zxing",
      detect: async (video) => {
        // Frames are read at most 1280 pixels wide: enough for a pass held to the camera.
        const scale = Math.min(1, 1280 / (video.videoWidth || 1));
        const width = Math.round(video.videoWidth * scale);
        const height = Math.round(video.videoHeight * scale);
        if (!width || !height) return [];
        if (canvas.width !== width || canvas.height !== height) {
          canvas.width = width;
          canvas.height = height;
        }
        context.drawImage(video, 0, 0, width, height);
        const found = await zxing.readBarcodes(context.getImageData(0, 0, width, height), options);
        return found.filter((code) => code.isValid).map((code) => code.text);
      },
    };
  }

  async function decodeLoop() {
    state.decoding = true;
    while (state.stream) {
      if (!document.hidden && ui.video.readyState >= 2) {
        try {
          const codes = await state.detector.detect(ui.video);
          if (codes.length > 0 && codes[0]) seen(codes[0]);
        } catch (_) {
          /* a frame that cannot be read is skipped */
        }
      }
      await new Promise((resolve) => setTimeout(resolve, DECODE_EVERY_MS));
    }
    state.decoding = false;
  }

  function seen(code) {
    const now = performance.now();
    const last = state.held.get(code);
    if (last !== undefined && now - last <= GONE_AFTER_MS) {
      state.held.set(code, now);
      return;
    }
    // Busy with another code: this one is posted once that answer has been closed.
    if (state.attempt || state.result) return;
    for (const [other, when] of state.held) {
      if (now - when > GONE_AFTER_MS) state.held.delete(other);
    }
    state.held.set(code, now);
    check(code);
  }

  // --- Asking Tessera -----------------------------------------------------------------------

  function newIdempotencyKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  }

  function check(code) {
    state.attempt = { code, idempotencyKey: newIdempotencyKey() };
    send();
  }

  // A retry reuses the attempt's Idempotency-Key: if the first answer was lost on the way,
  // Tessera replays it instead of counting the scan twice.
  async function send() {
    const attempt = state.attempt;
    setStatus("Checking…");
    const payload = { code: attempt.code };
    if (state.location) payload.location = state.location;
    let response;
    let answer = null;
    try {
      response = await fetch(page.scanApi, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${state.key}`,
          "Content-Type": "application/json",
          "Idempotency-Key": attempt.idempotencyKey,
        },
        body: JSON.stringify(payload),
        cache: "no-store",
        credentials: "omit",
        signal: AbortSignal.timeout ? AbortSignal.timeout(ANSWER_TIMEOUT_MS) : undefined,
      });
      answer = await response.json().catch(() => null);
    } catch (_) {
      showResult(problem("No answer from Tessera", "Check the connection, then try again.", true));
      return;
    }
    if (response.status === 200 && answer && answer.object === "scan") {
      showDecision(answer);
    } else if (response.status === 401 || response.status === 403) {
      const reason =
        response.status === 401
          ? "This scanner key was revoked or mistyped."
          : "This key may not check passes.";
      showResult({
        ...problem("Key not accepted", reason, false),
        nextLabel: "Enter a key",
        then: () => showSetup("The last key was not accepted. Enter a new scanner key."),
      });
    } else if (response.status === 400) {
      const message = answer && answer.error && answer.error.message;
      showResult(problem("Not checked", message || "Tessera could not read this code.", false));
    } else if (response.status === 429) {
      showResult(problem("Not checked", "Too many scans at once. Wait a moment.", true));
    } else {
      showResult(problem("Not checked", `Tessera answered with an error (${response.status}).`, true));
    }
  }

  function problem(reason, detail, retry) {
    return { kind: "problem", title: "Not checked", reason, holder: "", detail, retry };
  }

  function remaining(count) {
    if (count === null || count === undefined) return "Unlimited uses";
    if (count === 0) return "No uses left";
    return count === 1 ? "1 use left" : `${count} uses left`;
  }

  function showDecision(scan) {
    const holder = (scan.pass && scan.pass.holder_name) || "";
    if (scan.result === "accepted") {
      state.accepted += 1;
      write("sessionStorage", COUNT_ITEM, String(state.accepted));
      ui.count.textContent = String(state.accepted);
      showResult({
        kind: "accepted",
        title: "Accepted",
        reason: "",
        holder: holder || "No name on this pass",
        detail: remaining(scan.redemptions_remaining),
        closeAfter: ACCEPTED_CLOSES_AFTER_MS,
      });
      return;
    }
    const [words, explanation] = REASONS[scan.reason] || [String(scan.reason || "Not valid"), ""];
    showResult({ kind: "rejected", title: "Rejected", reason: words, holder, detail: explanation });
  }

  // --- The answer on screen -----------------------------------------------------------------

  function showResult(result) {
    state.result = result;
    ui.result.className = `result result-${result.kind}`;
    ui.resultTitle.textContent = result.title;
    for (const [element, text] of [
      [ui.resultReason, result.reason],
      [ui.resultHolder, result.holder],
      [ui.resultDetail, result.detail],
    ]) {
      element.textContent = text || "";
      element.hidden = !text;
    }
    ui.retry.hidden = !result.retry;
    ui.next.textContent = result.nextLabel || "Scan next";
    ui.result.hidden = false;
    ui.next.focus();
    signal(result.kind);
    clearTimeout(state.closeTimer);
    if (result.closeAfter) state.closeTimer = setTimeout(closeResult, result.closeAfter);
  }

  function closeResult() {
    const result = state.result;
    clearTimeout(state.closeTimer);
    ui.result.hidden = true;
    state.result = null;
    state.attempt = null;
    if (result && result.then) result.then();
    else if (state.stream) readyStatus();
    else if (!ui.scanner.hidden) startCamera();
  }

  function retry(event) {
    event.stopPropagation();
    if (!state.attempt) return;
    ui.result.hidden = true;
    state.result = null;
    send();
  }

  // --- Sound and vibration ------------------------------------------------------------------

  // Browsers start sound only after a tap: the first one anywhere turns it on.
  function unlockAudio() {
    const Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) return;
    if (!state.audio) state.audio = new Context();
    if (state.audio.state === "suspended") {
      state.audio.resume().then(() => {
        if (state.stream && !state.attempt && !state.result) readyStatus();
      }, () => {});
    }
  }

  function signal(kind) {
    if (navigator.vibrate) {
      try {
        navigator.vibrate(kind === "accepted" ? 120 : [250, 120, 250]);
      } catch (_) {
        /* no vibration */
      }
    }
    const tones = kind === "accepted" ? [[880, 0, 0.15]] : [[220, 0, 0.22], [220, 0.32, 0.22]];
    const audio = state.audio;
    if (!audio || audio.state !== "running") return;
    const start = audio.currentTime;
    for (const [frequency, offset, length] of tones) {
      const oscillator = audio.createOscillator();
      const gain = audio.createGain();
      oscillator.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, start + offset);
      gain.gain.exponentialRampToValueAtTime(0.3, start + offset + 0.01);
      gain.gain.exponentialRampToValueAtTime(0.0001, start + offset + length);
      oscillator.connect(gain).connect(audio.destination);
      oscillator.start(start + offset);
      oscillator.stop(start + offset + length + 0.02);
    }
  }

  // --- Wiring -------------------------------------------------------------------------------

  function checkTyped(event) {
    event.preventDefault();
    unlockAudio();
    const code = ui.manualCode.value.trim();
    if (!code || state.attempt || state.result) return;
    ui.manualCode.value = "";
    ui.manualCode.blur();
    check(code);
  }

  function init() {
    state.accepted = Number(read("sessionStorage", COUNT_ITEM)) || 0;
    ui.count.textContent = String(state.accepted);
    state.location = read("localStorage", LOCATION_ITEM) || "";
    ui.keyForm.addEventListener("submit", saveKey);
    ui.cancelSetup.addEventListener("click", () => useKey(state.key));
    ui.forgetKey.addEventListener("click", forgetKey);
    ui.changeKey.addEventListener("click", () => showSetup(""));
    ui.manualForm.addEventListener("submit", checkTyped);
    ui.result.addEventListener("click", closeResult);
    ui.retry.addEventListener("click", retry);
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && state.result) closeResult();
    });
    document.addEventListener("pointerdown", unlockAudio, { passive: true });
    document.addEventListener("visibilitychange", () => {
      // The camera is released while the page is hidden, and reopened when it comes back.
      if (document.hidden) stopCamera();
      else if (state.key && !ui.scanner.hidden) startCamera();
    });
    const key = read("localStorage", KEY_ITEM);
    if (key && SCANNER_KEY.test(key)) useKey(key);
    else showSetup("");
    if ("serviceWorker" in navigator) {
      navigator.serviceWorker.register(page.serviceWorker, { scope: page.scope }).catch(() => {
        /* the page works without it, only not offline */
      });
    }
  }

  init();
})();
