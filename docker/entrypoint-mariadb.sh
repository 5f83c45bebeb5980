#!/bin/sh
# Entrypoint of the offline MariaDB image. Honours the environment variables
# of the official mysql image that stockbench uses: MYSQL_ROOT_PASSWORD,
# MYSQL_DATABASE. Reads extra settings from /etc/mysql/conf.d/*.cnf.
set -e
if [ "$1" = "mariadbd" ] || [ "$1" = "mysqld" ]; then
  shift
  datadir=/var/lib/mysql
  mkdir -p /run/mysqld
  chown mysql:mysql /run/mysqld "$datadir"
  if [ ! -d "$datadir/mysql" ]; then
    mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db --auth-root-authentication-method=normal >/dev/null
    init=$(mktemp)
    {
      echo "FLUSH PRIVILEGES;"
      if [ -n "$MYSQL_ROOT_PASSWORD" ]; then
        echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$MYSQL_ROOT_PASSWORD';"
        echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$MYSQL_ROOT_PASSWORD';"
        # With host networking clients come from 127.0.0.1, which matches
        # these more specific accounts (if the installer made them) before '%'.
        for h in 127.0.0.1 ::1 "$(hostname)"; do
          echo "ALTER USER IF EXISTS 'root'@'$h' IDENTIFIED BY '$MYSQL_ROOT_PASSWORD';"
        done
      else
        echo "CREATE USER IF NOT EXISTS 'root'@'%';"
      fi
      echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
      [ -n "$MYSQL_DATABASE" ] && echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;"
    } >"$init"
    chown mysql "$init"
    set -- --init-file="$init" "$@"
  fi
  exec mariadbd --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --skip-name-resolve "$@"
fi
exec "$@"
