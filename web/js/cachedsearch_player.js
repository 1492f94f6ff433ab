// Drafts you can watch: a row's decoded frames play as a small looping video, and open in a large view with
// play/pause and frame stepping. Frames are the images the nodes list in their UI payloads; one the server no
// longer has (deleted, or an older CachedSearch's temp image after a restart) is said to be missing, in its place.
import { api } from "../../../scripts/api.js";

const FRAME_MILLISECONDS = 125; // 8 frames a second: a draft's 8 evenly spaced frames loop once a second

const STYLE = `
.cachedsearch-player { display: block; height: 36px; max-width: 64px; object-fit: contain; cursor: zoom-in; }
.cachedsearch-missing { display: block; width: 64px; height: 36px; font: 9px sans-serif; line-height: 11px;
  white-space: normal; text-align: center; overflow: hidden; opacity: 0.7; border: 1px dashed currentColor;
  box-sizing: border-box; }
.cachedsearch-overlay .cachedsearch-missing-large { font: 16px sans-serif; padding: 40px; border: 1px dashed #eee; }
.cachedsearch-overlay { position: fixed; inset: 0; background: rgba(0, 0, 0, 0.85); display: flex;
  flex-direction: column; align-items: center; justify-content: center; gap: 8px; z-index: 10000; color: #eee;
  font: 14px sans-serif; }
.cachedsearch-overlay img.cachedsearch-large { width: min(90vw, 140vh); max-height: 72vh; object-fit: contain;
  image-rendering: pixelated; }
.cachedsearch-overlay .cachedsearch-controls { display: flex; gap: 6px; align-items: center; }
.cachedsearch-overlay button { font: 14px sans-serif; padding: 4px 10px; cursor: pointer; }
.cachedsearch-overlay .cachedsearch-close { position: absolute; top: 12px; right: 16px; }`;

export function ensurePlayerStyle() {
  if (document.getElementById("cachedsearch-player-style")) return;
  const style = document.createElement("style");
  style.id = "cachedsearch-player-style";
  style.textContent = STYLE;
  document.head.append(style);
}

export const FRAME_MISSING = "frame no longer kept";

export function frameUrl(frame) {
  const query = new URLSearchParams({ filename: frame.filename, subfolder: frame.subfolder ?? "", type: frame.type ?? "temp" });
  return api.apiURL(`/view?${query}`);
}

// One timer drives every small player on the page; a player whose element left the page is dropped.
const playing = new Set();
let ticker;

function tick() {
  for (const player of playing) {
    if (!player.element.isConnected) {
      playing.delete(player);
      continue;
    }
    player.show(player.index + 1);
  }
  if (playing.size === 0) {
    clearInterval(ticker);
    ticker = undefined;
  }
}

function startTicker(player) {
  playing.add(player);
  ticker ??= setInterval(tick, FRAME_MILLISECONDS);
}

// An <img> that loops through `frames`; `dataset.frames` says how many it plays.
export function createPlayer(frames, title) {
  const element = document.createElement("img");
  element.className = "cachedsearch-player";
  element.dataset.frames = frames.length;
  element.title = title;
  const urls = frames.map(frameUrl);
  const player = {
    element, index: 0,
    show(index) {
      this.index = index % urls.length;
      element.src = urls[this.index];
      element.dataset.frame = this.index;
    },
  };
  // A missing frame: the player gives way to a note the same size (nothing to play or enlarge).
  element.addEventListener("error", () => {
    playing.delete(player);
    const missing = document.createElement("div");
    missing.className = "cachedsearch-missing";
    missing.textContent = FRAME_MISSING;
    missing.title = `${FRAME_MISSING}: the server no longer has this draft's frame (${title.split(":")[0]})`;
    element.replaceWith(missing);
  }, { once: true });
  player.show(0);
  if (urls.length > 1) startTicker(player);
  return element;
}

function button(text, title, onClick) {
  const element = document.createElement("button");
  element.textContent = text;
  element.title = title;
  element.addEventListener("click", (event) => {
    event.stopPropagation();
    onClick(event);
  });
  return element;
}

// The large view's picture, and the note that stands in for a frame the server lacks (the next frame that loads
// shows again).
function largePicture() {
  const picture = document.createElement("img");
  picture.className = "cachedsearch-large";
  const missing = document.createElement("div");
  missing.className = "cachedsearch-missing-large";
  missing.textContent = FRAME_MISSING;
  missing.hidden = true;
  picture.addEventListener("error", () => {
    picture.hidden = true;
    missing.hidden = false;
  });
  picture.addEventListener("load", () => {
    picture.hidden = false;
    missing.hidden = true;
  });
  return { picture, missing };
}

// The frames of `urls` on `picture`, paused or playing, stepped frame by frame: the controls (previous, play/pause,
// next, the frame counter), what the keys call, and start, which shows the first frame and plays several.
function frameStepper(urls, picture) {
  const counter = document.createElement("span");
  counter.className = "cachedsearch-frame-counter";
  let index = 0;
  let timer;
  const show = (next) => {
    index = (next + urls.length) % urls.length;
    picture.src = urls[index];
    counter.textContent = `frame ${index + 1} / ${urls.length}`;
  };
  const playPause = button("", "Play or pause (space)", () => toggle());
  playPause.className = "cachedsearch-play";
  const play = () => {
    timer ??= setInterval(() => show(index + 1), FRAME_MILLISECONDS);
    playPause.textContent = "❚❚ pause";
  };
  const pause = () => {
    clearInterval(timer);
    timer = undefined;
    playPause.textContent = "▶ play";
  };
  const toggle = () => (timer ? pause() : play());
  const step = (by) => {
    pause();
    show(index + by);
  };
  const previous = button("◀", "Previous frame (←)", () => step(-1));
  previous.className = "cachedsearch-previous";
  const next = button("▶", "Next frame (→)", () => step(1));
  next.className = "cachedsearch-next";
  const controls = document.createElement("div");
  controls.className = "cachedsearch-controls";
  controls.append(previous, playPause, next, counter);
  const start = () => {
    show(0);
    if (urls.length > 1) play();
    else playPause.disabled = true;
  };
  return { controls, pause, toggle, step, start };
}

// `actions` as buttons ({text, title, run, className}); each closes the view first.
function actionButtons(actions, close) {
  const picks = document.createElement("div");
  picks.className = "cachedsearch-controls cachedsearch-picks";
  for (const action of actions) {
    const pick = button(action.text, action.title, () => {
      close();
      action.run();
    });
    pick.className = action.className ?? "";
    picks.append(pick);
  }
  return picks;
}

// The large view: the frames at screen size, paused or playing, stepped frame by frame; `actions` are extra
// buttons ({text, title, run}) such as the pick. Esc, the close button or a click on the backdrop closes it.
export function showLarge(frames, caption, actions = []) {
  document.querySelector(".cachedsearch-overlay")?.remove();
  const overlay = document.createElement("div");
  overlay.className = "cachedsearch-overlay";
  const { picture, missing } = largePicture();
  const frameSteps = frameStepper(frames.map(frameUrl), picture);
  const close = () => {
    frameSteps.pause();
    overlay.remove();
    document.removeEventListener("keydown", onKey, true);
  };
  const keys = { Escape: close, " ": frameSteps.toggle, ArrowLeft: () => frameSteps.step(-1),
    ArrowRight: () => frameSteps.step(1) };
  function onKey(event) {
    if (!keys[event.key]) return;
    event.preventDefault();
    event.stopPropagation();
    keys[event.key]();
  }
  const captionLine = document.createElement("div");
  captionLine.className = "cachedsearch-caption";
  captionLine.textContent = caption;
  const closeButton = button("✕", "Close (Esc)", close);
  closeButton.className = "cachedsearch-close";
  overlay.append(closeButton, picture, missing, frameSteps.controls, captionLine, actionButtons(actions, close));
  overlay.addEventListener("click", (event) => event.target === overlay && close());
  document.addEventListener("keydown", onKey, true);
  document.body.append(overlay);
  frameSteps.start();
  return overlay;
}
