// A stand-in for `brain serve` that reads requests and never answers: the
// engine must still give the turn back within its deadline.
process.stdin.on("data", () => {});
setInterval(() => {}, 1 << 30);
