module kfed.local/pause

go 1.24
