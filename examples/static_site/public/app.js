// The server answers every page navigation with index.html; the script decides what to show.
"use strict";
document.getElementById("path").textContent = location.pathname;
console.log("static site loaded at", location.pathname);
