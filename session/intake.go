package session

import (
	"github.com/visorhq/visor/internal/userpath"
	"github.com/visorhq/visor/tools"
)

// ReadImageFile reads the image file at path (~ expanded) under the service's intake limits (Config.Images), for
// Attach or CheckImage: what is no regular file or passes the size bound is refused naming why, before it is
// read whole.
func (s *Service) ReadImageFile(path string) ([]byte, error) {
	return s.cfg.Images.Read(userpath.Expand(path))
}

// ReadImage is ReadImageFile then CheckImage: an image file taken in under the one intake policy.
func (s *Service) ReadImage(path string) (tools.Image, error) {
	data, err := s.ReadImageFile(path)
	if err != nil {
		return tools.Image{}, err
	}
	return s.CheckImage(data)
}

// ReadImageFile is Service.ReadImageFile, for front ends that hold a session.
func (s *Session) ReadImageFile(path string) ([]byte, error) { return s.svc.ReadImageFile(path) }

// VisionOf is what is known of the engine's projector before it loads: a server visor starts (not remote) has one
// exactly when a projector file was given; a remote one is known once its /props is read.
func VisionOf(remote, projector bool) Vision {
	switch {
	case remote:
		return VisionUnknown
	case projector:
		return VisionYes
	}
	return VisionNo
}
