# shellcheck shell=bash disable=SC2034
# kiwi/php:8.2: Debian's php-cli (8.2), composer and the common extensions.
NAME=php8.2
REF=kiwi/php:8.2
RUNTIME=php
VERSION=8.2
DESCRIPTION="Debian php-cli 8.2 + composer and common extensions"
APT_PACKAGES=(php-cli composer php-mbstring php-xml php-curl php-zip php-intl php-sqlite3
  php-bcmath php-gd php-mysql php-pgsql)
DOWNLOADS=()
IMAGE_ENV=(COMPOSER_HOME=/home/kiwi/.composer
  PATH=/home/kiwi/.composer/vendor/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "php|^PHP 8\.2\.|php -v"
  "composer|^Composer (version )?2\.|composer --version 2>/dev/null"
  "extensions|^all loaded$|php -r 'foreach ([\"mbstring\",\"xml\",\"dom\",\"curl\",\"zip\",\"intl\",\"pdo_sqlite\",\"bcmath\",\"gd\",\"pdo_mysql\",\"pdo_pgsql\",\"json\",\"openssl\"] as \$e) if (!extension_loaded(\$e)) { echo \"missing \$e\n\"; exit(1);} echo \"all loaded\n\";'"
)
